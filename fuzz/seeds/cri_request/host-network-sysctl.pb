
M
)
host-sysctluid-host-sysctldefault B 

net.ipv4.ip_forward1