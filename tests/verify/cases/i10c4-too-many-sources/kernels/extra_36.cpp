int extra_36 = 36;
