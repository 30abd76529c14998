
%

hostuid-hostdefault B
