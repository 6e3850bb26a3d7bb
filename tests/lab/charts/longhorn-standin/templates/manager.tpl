# longhorn-manager runs on every node it tolerates (the real chart: templates/daemonset-sa.yaml).
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: longhorn-manager
  namespace: {{ .Release.Namespace }}
  labels:
    app: longhorn-manager
spec:
  selector:
    matchLabels:
      app: longhorn-manager
  template:
    metadata:
      labels:
        app: longhorn-manager
    spec:
      {{- with .Values.longhornManager.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: longhorn-manager
          image: longhornio/longhorn-manager:{{ .Chart.AppVersion }}
