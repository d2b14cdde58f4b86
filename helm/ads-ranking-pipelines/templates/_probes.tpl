{{/* A probe running `dagster api grpc-health-check -p <port>` unless the values give their own
handler. Arguments: (list $probeValues $port $kind); off when `enabled: false` or empty. */}}
{{- define "arp.grpcProbe" -}}
{{- $probe := index . 0 | default dict -}}
{{- $port := index . 1 -}}
{{- $kind := index . 2 -}}
{{- if and $probe (ne (toString $probe.enabled) "false") -}}
{{ $kind }}:
  {{- $rest := omit $probe "enabled" }}
  {{- if not (or $rest.exec $rest.grpc $rest.httpGet $rest.tcpSocket) }}
  exec:
    command: ["dagster", "api", "grpc-health-check", "-p", {{ $port | toString | quote }}]
  {{- end }}
  {{- with $rest }}{{ toYaml . | nindent 2 }}{{ end }}
{{- end }}
{{- end -}}
