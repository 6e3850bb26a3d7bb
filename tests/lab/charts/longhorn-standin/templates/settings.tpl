# Settings as the manager creates them from defaultSettings (the real chart: default-setting.yaml ConfigMap).
{{- $settings := dict "taint-toleration" .Values.defaultSettings.taintToleration "default-replica-count" .Values.defaultSettings.defaultReplicaCount "deleting-confirmation-flag" .Values.defaultSettings.deletingConfirmationFlag }}
{{- range $name, $value := $settings }}
---
apiVersion: longhorn.io/v1beta2
kind: Setting
metadata:
  name: {{ $name }}
  namespace: {{ $.Release.Namespace }}
value: {{ if kindIs "invalid" $value }}""{{ else }}{{ $value | toString | quote }}{{ end }}
{{- end }}
---
# The chart's default StorageClass "longhorn" comes from this ConfigMap (the real chart: storageclass.yaml).
apiVersion: v1
kind: ConfigMap
metadata:
  name: longhorn-storageclass
  namespace: {{ .Release.Namespace }}
data:
  storageclass.yaml: |
    kind: StorageClass
    apiVersion: storage.k8s.io/v1
    metadata:
      name: longhorn
      annotations:
        storageclass.kubernetes.io/is-default-class: {{ .Values.persistence.defaultClass | toString | quote }}
    provisioner: driver.longhorn.io
    parameters:
      numberOfReplicas: {{ .Values.persistence.defaultClassReplicaCount | toString | quote }}
