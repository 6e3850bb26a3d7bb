# The operator (the real chart: templates/cilium-operator/deployment.yaml).
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cilium-operator
  namespace: {{ .Release.Namespace }}
  labels:
    io.cilium/app: operator
    name: cilium-operator
spec:
  replicas: {{ .Values.operator.replicas }}
  selector:
    matchLabels:
      io.cilium/app: operator
      name: cilium-operator
  template:
    metadata:
      labels:
        io.cilium/app: operator
        name: cilium-operator
    spec:
      hostNetwork: true
      tolerations:
        - operator: Exists
      containers:
        - name: cilium-operator
          image: {{ .Values.operator.image.repository }}-generic:v{{ .Chart.AppVersion }}
          command: [cilium-operator-generic]
