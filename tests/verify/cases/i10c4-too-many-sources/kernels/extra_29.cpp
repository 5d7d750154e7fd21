int extra_29 = 29;
