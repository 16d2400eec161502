"""The project's plain-torch re-implementations of SGLang's ops, signature and convention, for CPU CI."""
