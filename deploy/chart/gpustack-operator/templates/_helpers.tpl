{{/* The release's base name: fullnameOverride, else <release>-gpustack-operator unless the
release name already holds the chart's name; at most 63 characters. */}}
{{- define "gpustack-operator.fullname" -}}
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

{{- define "gpustack-operator.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "gpustack-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gpustack-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "worker"). The worker's name
is fixed: the Service the worker makes for itself (gpustack-operator-worker) selects it. */}}
{{- define "gpustack-operator.selector" -}}
app.kubernetes.io/part-of: gpustack-operator
app.kubernetes.io/component: {{ .component }}
{{- if eq .component "worker" }}
app.kubernetes.io/name: gpustack-operator-worker
{{- else }}
app.kubernetes.io/name: {{ include "gpustack-operator.fullname" .root }}-{{ .component }}
{{- end }}
{{- end -}}

{{/* An image reference from (dict "root" $ "registry" R "repository" P "tag" T "own" bool):
global.imageRegistry replaces the registry, global.imageNamespace the path before the last
segment; global.imageTag replaces the tag of the operator's own images ("own"). */}}
{{- define "gpustack-operator.imageRef" -}}
{{- $g := .root.Values.global -}}
{{- $repo := .repository -}}
{{- $registry := .registry -}}
{{- $first := first (splitList "/" $repo) -}}
{{- if and (not $registry) (gt (len (splitList "/" $repo)) 1) (or (contains "." $first) (contains ":" $first)) -}}
{{- $registry = $first -}}
{{- $repo = join "/" (rest (splitList "/" $repo)) -}}
{{- end -}}
{{- if $g.imageRegistry -}}{{- $registry = $g.imageRegistry -}}{{- end -}}
{{- if $g.imageNamespace -}}
{{- $repo = printf "%s/%s" $g.imageNamespace (last (splitList "/" $repo)) -}}
{{- end -}}
{{- $tag := .tag -}}
{{- if and .own $g.imageTag -}}{{- $tag = $g.imageTag -}}{{- end -}}
{{- if $registry -}}{{- printf "%s/%s:%s" (trimSuffix "/" $registry) $repo $tag -}}
{{- else -}}{{- printf "%s:%s" $repo $tag -}}{{- end -}}
{{- end -}}

{{/* The operator's image, the same for every component. */}}
{{- define "gpustack-operator.image" -}}
{{- include "gpustack-operator.imageRef" (dict "root" . "registry" "" "repository" .Values.image.repository "tag" (default .Chart.AppVersion .Values.image.tag) "own" true) -}}
{{- end -}}

{{- define "gpustack-operator.pullPolicy" -}}
{{- default .Values.image.pullPolicy .Values.global.imagePullPolicy -}}
{{- end -}}

{{- define "gpustack-operator.pullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The downward-API environment every component reads. */}}
{{- define "gpustack-operator.podEnv" -}}
- name: KUBERNETES_POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- name: KUBERNETES_POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: KUBERNETES_NODE_NAME
  valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
{{- end -}}

{{/* Whether ServiceMonitors are rendered. */}}
{{- define "gpustack-operator.serviceMonitors" -}}
{{- $m := toString .Values.monitoring.serviceMonitors -}}
{{- if or (eq $m "true") (and (eq $m "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor")) -}}
true
{{- end -}}
{{- end -}}
