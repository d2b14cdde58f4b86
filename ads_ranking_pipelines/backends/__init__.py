"""Where Ray jobs run: a local Ray cluster (embedded default) or KubeRay."""
