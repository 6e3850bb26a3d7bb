"""The real kube-apiserver lane (``make test-k8s-real``): fake kubelet, HTTP helper, lane tests."""
