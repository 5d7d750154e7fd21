int extra_30 = 30;
