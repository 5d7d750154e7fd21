int extra_04 = 4;
