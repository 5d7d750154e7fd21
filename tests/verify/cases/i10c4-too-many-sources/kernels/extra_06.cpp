int extra_06 = 6;
