int extra_26 = 26;
