int extra_38 = 38;
