"""The Kubernetes API emulator (``lab.kube.server``): API, store, controllers, schemas, GPU simulators."""
