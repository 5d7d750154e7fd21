int extra_11 = 11;
