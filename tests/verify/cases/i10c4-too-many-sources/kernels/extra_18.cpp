int extra_18 = 18;
