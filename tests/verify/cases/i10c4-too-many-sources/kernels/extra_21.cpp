int extra_21 = 21;
