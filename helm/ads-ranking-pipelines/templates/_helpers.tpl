{{/* Names ---------------------------------------------------------------------------------- */}}
{{- define "arp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "arp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "arp.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "arp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ads-ranking-pipelines
{{- end -}}

{{- define "arp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "arp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The service account of the code server and its run pods. */}}
{{- define "arp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "arp.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "arp.rayServiceAccountName" -}}
{{- default (printf "%s-ray" (include "arp.fullname" .)) .Values.rayServiceAccount.name -}}
{{- end -}}

{{- define "arp.xrayName" -}}
{{- printf "%s-xray" (include "arp.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "arp.xrayServiceAccountName" -}}
{{- default (include "arp.xrayName" .) .Values.xray.serviceAccount.name -}}
{{- end -}}

{{- define "arp.poolsConfigMapName" -}}
{{- printf "%s-pools" (include "arp.fullname" .) -}}
{{- end -}}

{{- define "arp.rayNamespace" -}}
{{- default .Release.Namespace .Values.kuberay.namespace -}}
{{- end -}}

{{/* Images ------------------------------------------------------------------------------------ */}}
{{- define "arp.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) -}}
{{- end -}}

{{- define "arp.rayImage" -}}
{{- $repo := default .Values.image.repository .Values.kuberay.image.repository -}}
{{- $tag := default (toString .Values.image.tag) (toString .Values.kuberay.image.tag) -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/* The pool used when a run names none; fails naming the value when it is not in the catalog. */}}
{{- define "arp.defaultPool" -}}
{{- $pool := default .Values.poolCatalog.default_pool .Values.defaultPool -}}
{{- $names := list -}}
{{- range .Values.poolCatalog.pools }}{{ $names = append $names .name }}{{ end -}}
{{- if not (has .Values.poolCatalog.default_pool $names) -}}
{{- fail (printf "poolCatalog.default_pool %q is not a pool of poolCatalog.pools; valid: %s" .Values.poolCatalog.default_pool (join ", " (sortAlpha $names))) -}}
{{- end -}}
{{- if not (has $pool $names) -}}
{{- fail (printf "defaultPool %q is not a pool of poolCatalog.pools; valid: %s" $pool (join ", " (sortAlpha $names))) -}}
{{- end -}}
{{- $pool -}}
{{- end -}}

{{/* Settings ----------------------------------------------------------------------------------
The environment the code location reads (config/settings.py, defs/resources.py) - the same in the
code server, the run pods (through the container context) and X-Ray. */}}
{{- define "arp.catalogDir" -}}/etc/ads-ranking{{- end -}}

{{- define "arp.managedEnvNames" -}}
{{- list "ADS_RANKING_HOME" "ADS_RANKING_BACKEND" "ADS_RANKING_POOL_CATALOG" "ADS_RANKING_NAMESPACE" "ADS_RANKING_RAY_IMAGE" "ADS_RANKING_RAY_SERVICE_ACCOUNT" "ADS_RANKING_RAY_AUTH_SECRET" "ADS_RANKING_DEFAULT_POOL" "ADS_RANKING_KUBE_IN_CLUSTER" "ADS_RANKING_SHARED_VOLUME_CLAIM" "ADS_RANKING_RAYJOB_DELETION" "ADS_RANKING_XRAY_TOKEN" "DAGSTER_CURRENT_IMAGE" "DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT" | toJson -}}
{{- end -}}

{{- define "arp.settingsEnv" -}}
- name: ADS_RANKING_HOME
  value: {{ .Values.storage.home | quote }}
- name: ADS_RANKING_BACKEND
  value: kuberay
- name: ADS_RANKING_POOL_CATALOG
  value: {{ printf "%s/pools.yaml" (include "arp.catalogDir" .) | quote }}
- name: ADS_RANKING_NAMESPACE
  value: {{ include "arp.rayNamespace" . | quote }}
- name: ADS_RANKING_RAY_IMAGE
  value: {{ include "arp.rayImage" . | quote }}
- name: ADS_RANKING_RAY_SERVICE_ACCOUNT
  value: {{ include "arp.rayServiceAccountName" . | quote }}
{{- with .Values.kuberay.authSecretName }}
- name: ADS_RANKING_RAY_AUTH_SECRET
  value: {{ . | quote }}
{{- end }}
- name: ADS_RANKING_DEFAULT_POOL
  value: {{ include "arp.defaultPool" . | quote }}
- name: ADS_RANKING_KUBE_IN_CLUSTER
  value: "true"
- name: ADS_RANKING_RAYJOB_DELETION
  value: {{ .Values.kuberay.rayjobDeletion | default "rules" | quote }}
{{- if hasPrefix "/" .Values.storage.home }}
- name: ADS_RANKING_SHARED_VOLUME_CLAIM
  value: {{ .Values.storage.sharedVolume.claimName | quote }}
{{- end }}
{{- end -}}

{{/* Extra env from values: refuses names the chart sets itself. Arguments: (list $ $env $where) */}}
{{- define "arp.extraEnv" -}}
{{- $ := index . 0 -}}
{{- $env := index . 1 -}}
{{- $where := index . 2 -}}
{{- $managed := include "arp.managedEnvNames" $ | fromJsonArray -}}
{{- range $i, $var := $env }}
{{- if has $var.name $managed }}
{{- fail (printf "%s[%d].name %q is set by the chart; use its value instead (see values.yaml): storage.home, kuberay.*, poolCatalog, defaultPool, xray.tokenSecret" $where $i $var.name) }}
{{- end }}
{{- end }}
{{- with $env }}{{ toYaml . }}{{ end }}
{{- end -}}

{{/* Volumes every pod running our code gets: the pool catalog, a writable /tmp, and the shared
storage volume when storage.home is a path. */}}
{{- define "arp.volumes" -}}
- name: pool-catalog
  configMap:
    name: {{ include "arp.poolsConfigMapName" . }}
- name: tmp
  emptyDir: {}
{{- if hasPrefix "/" .Values.storage.home }}
- name: storage
  persistentVolumeClaim:
    claimName: {{ .Values.storage.sharedVolume.claimName }}
{{- end }}
{{- end -}}

{{- define "arp.volumeMounts" -}}
- name: pool-catalog
  mountPath: {{ include "arp.catalogDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if hasPrefix "/" .Values.storage.home }}
- name: storage
  mountPath: {{ .Values.storage.home }}
{{- end }}
{{- end -}}

{{/* The container context `dagster api grpc` passes to the runs it serves (the same env var the
official dagster-user-deployments chart sets): run pods get this location's service account,
settings, secrets and volumes, plus their own resources and security contexts. */}}
{{- define "arp.containerContext" -}}
{{- $loc := .Values.codeLocation -}}
{{- $run := .Values.runPods -}}
k8s:
  namespace: {{ .Release.Namespace }}
  service_account_name: {{ include "arp.serviceAccountName" . }}
  image_pull_policy: {{ .Values.image.pullPolicy }}
  {{- with .Values.imagePullSecrets }}
  image_pull_secrets: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $loc.envConfigMaps }}
  env_config_maps: [{{ range $i, $c := . }}{{ if $i }}, {{ end }}{{ $c.name | quote }}{{ end }}]
  {{- end }}
  {{- with $loc.envSecrets }}
  env_secrets: [{{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s.name | quote }}{{ end }}]
  {{- end }}
  env:
    {{- include "arp.settingsEnv" . | nindent 4 }}
    {{- with include "arp.extraEnv" (list . $loc.env "codeLocation.env") }}{{ . | nindent 4 }}{{ end }}
  volumes:
    {{- include "arp.volumes" . | nindent 4 }}
    {{- with $loc.volumes }}{{ toYaml . | nindent 4 }}{{ end }}
  volume_mounts:
    {{- include "arp.volumeMounts" . | nindent 4 }}
    {{- with $loc.volumeMounts }}{{ toYaml . | nindent 4 }}{{ end }}
  labels:
    app.kubernetes.io/part-of: ads-ranking-pipelines
    app.kubernetes.io/instance: {{ .Release.Name }}
    {{- with $run.labels }}{{ toYaml . | nindent 4 }}{{ end }}
  run_k8s_config:
    container_config:
      resources: {{- toYaml $run.resources | nindent 8 }}
      securityContext: {{- toYaml (default $loc.securityContext $run.securityContext) | nindent 8 }}
      volumeMounts:
        - name: dagster-storage
          mountPath: {{ printf "%s/storage" (trimSuffix "/" $run.dagsterHome) }}
    pod_spec_config:
      securityContext: {{- toYaml (default $loc.podSecurityContext $run.podSecurityContext) | nindent 8 }}
      volumes:
        - name: dagster-storage
          emptyDir: {}
{{- end -}}
