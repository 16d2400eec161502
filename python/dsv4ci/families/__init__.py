"""One module per kernel family: the SGLang functions of the family, registered as dsv4ci.ops.Op."""
