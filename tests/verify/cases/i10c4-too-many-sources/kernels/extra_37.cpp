int extra_37 = 37;
