{{- /* The agent's options, as the real chart's templates/cilium-configmap.yaml names them. */ -}}
{{- $kpr := eq (toString .Values.kubeProxyReplacement) "true" -}}
{{- if and $kpr (not .Values.k8sServiceHost) -}}
{{- fail "kubeProxyReplacement=true needs k8sServiceHost and k8sServicePort: without kube-proxy the agent cannot reach the API through the kubernetes Service" -}}
{{- end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: {{ .Release.Namespace }}
data:
  kube-proxy-replacement: {{ ternary "true" "false" $kpr | quote }}
  ipam: {{ .Values.ipam.mode | quote }}
  enable-l2-announcements: {{ .Values.l2announcements.enabled | toString | quote }}
  enable-external-ips: {{ .Values.externalIPs.enabled | toString | quote }}
  {{- with .Values.k8sClientRateLimit.qps }}
  k8s-client-qps: {{ . | toString | quote }}
  {{- end }}
  {{- with .Values.k8sClientRateLimit.burst }}
  k8s-client-burst: {{ . | toString | quote }}
  {{- end }}
  {{- if .Values.k8sServiceHost }}
  k8s-service-host: {{ .Values.k8sServiceHost | toString | quote }}
  k8s-service-port: {{ .Values.k8sServicePort | toString | quote }}
  {{- end }}
  {{- with .Values.devices }}
  devices: {{ . | toString | quote }}
  {{- end }}
