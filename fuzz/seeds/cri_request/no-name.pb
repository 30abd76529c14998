

uid-xdefault 