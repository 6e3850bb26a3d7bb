# The driver deployer and the UI (the real chart: deployment-driver.yaml, deployment-ui.yaml).
apiVersion: apps/v1
kind: Deployment
metadata:
  name: longhorn-driver-deployer
  namespace: {{ .Release.Namespace }}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: longhorn-driver-deployer
  template:
    metadata:
      labels:
        app: longhorn-driver-deployer
    spec:
      {{- with .Values.longhornDriver.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: longhorn-driver-deployer
          image: longhornio/longhorn-manager:{{ .Chart.AppVersion }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: longhorn-ui
  namespace: {{ .Release.Namespace }}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: longhorn-ui
  template:
    metadata:
      labels:
        app: longhorn-ui
    spec:
      {{- with .Values.longhornUI.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: longhorn-ui
          image: longhornio/longhorn-ui:{{ .Chart.AppVersion }}
