"""Pure KubeRay manifest builders and a thin Kubernetes client."""
