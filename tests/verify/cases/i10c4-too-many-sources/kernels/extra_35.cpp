int extra_35 = 35;
