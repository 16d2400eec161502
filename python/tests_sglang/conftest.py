"""SGLang's own ops on drawn cases (the nightly `sglang-kernels` suite): the plugin does the work."""

pytest_plugins = ["dsv4ci.plugin"]
