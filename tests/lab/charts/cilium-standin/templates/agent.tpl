# The agent runs on every node and tolerates every taint (the real chart: templates/cilium-agent/daemonset.yaml).
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: {{ .Release.Namespace }}
  labels:
    k8s-app: cilium
    app.kubernetes.io/name: cilium-agent
    app.kubernetes.io/part-of: cilium
spec:
  selector:
    matchLabels:
      k8s-app: cilium
  template:
    metadata:
      labels:
        k8s-app: cilium
        app.kubernetes.io/name: cilium-agent
    spec:
      hostNetwork: true
      priorityClassName: system-node-critical
      tolerations:
        - operator: Exists
      containers:
        - name: cilium-agent
          image: {{ .Values.image.repository }}:v{{ .Chart.AppVersion }}
          command: [cilium-agent]
          args: [--config-dir=/tmp/cilium/config-map]
