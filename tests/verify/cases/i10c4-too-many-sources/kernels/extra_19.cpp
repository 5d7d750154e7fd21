int extra_19 = 19;
