int extra_22 = 22;
