# One Longhorn Node per cluster node whose taints the manager tolerates, ready and schedulable, as the
# managers would register them. Plain objects (hooks that run pods do not run in the emulator); the
# lookup needs a live cluster (empty under helm template).
{{- $tolerations := .Values.longhornManager.tolerations | default list }}
{{- range $node := (lookup "v1" "Node" "" "").items }}
{{- $ok := true }}
{{- range $taint := (dig "spec" "taints" list $node) }}
{{- if or (eq $taint.effect "NoSchedule") (eq $taint.effect "NoExecute") }}
{{- $tolerated := false }}
{{- range $t := $tolerations }}
{{- if and (eq ($t.key | default "") $taint.key) (or (eq ($t.operator | default "Equal") "Exists") (eq ($t.value | default "") ($taint.value | default ""))) (or (not $t.effect) (eq $t.effect $taint.effect)) }}
{{- $tolerated = true }}
{{- end }}
{{- end }}
{{- if not $tolerated }}{{ $ok = false }}{{ end }}
{{- end }}
{{- end }}
{{- if $ok }}
---
apiVersion: longhorn.io/v1beta2
kind: Node
metadata:
  name: {{ $node.metadata.name }}
  namespace: {{ $.Release.Namespace }}
spec:
  name: {{ $node.metadata.name }}
  allowScheduling: true
  disks:
    default-disk:
      path: /var/lib/longhorn/
      allowScheduling: true
status:
  conditions:
    - type: Ready
      status: "True"
    - type: Schedulable
      status: "True"
    - type: MountPropagation
      status: "True"
  diskStatus:
    default-disk:
      conditions:
        - type: Ready
          status: "True"
        - type: Schedulable
          status: "True"
{{- end }}
{{- end }}
