int extra_23 = 23;
