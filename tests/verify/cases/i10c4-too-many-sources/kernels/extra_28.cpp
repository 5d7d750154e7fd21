int extra_28 = 28;
