"""The planning core: pure computation (stdlib, numpy, scipy), no IO and no frameworks."""
