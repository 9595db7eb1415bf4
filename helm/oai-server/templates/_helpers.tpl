{{- define "oai-server.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "oai-server.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "oai-server.labels" -}}
{{ include "oai-server.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The setting `key` (camelCase, as in values) as the server reads it: OAI_<SNAKE_CASE>. */}}
{{- define "oai-server.envName" -}}
{{- printf "OAI_%s" (snakecase . | upper) -}}
{{- end -}}

{{/*
A value as an environment string: lists and maps as JSON (how pydantic-settings reads
them), whole numbers without the exponent that YAML's float64 would print (4194304, not
4.194304e+06), anything else as written.
*/}}
{{- define "oai-server.envValue" -}}
{{- if or (kindIs "slice" .) (kindIs "map" .) -}}
{{- toJson . -}}
{{- else if and (kindIs "float64" .) (eq (floor .) .) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{- define "oai-server.port" -}}
{{- .Values.server.port | default 8000 | int -}}
{{- end -}}

{{/* GPUs per pod: `gpus`, else the tensor-parallel size when it is above one. */}}
{{- define "oai-server.gpus" -}}
{{- $tp := .Values.server.tensorParallelSize | default 1 | int -}}
{{- $gpus := .Values.gpus | int -}}
{{- if and (gt $gpus 0) (lt $gpus $tp) -}}
{{- fail (printf "gpus (%d) is less than server.tensorParallelSize (%d)" $gpus $tp) -}}
{{- end -}}
{{- if gt $gpus 0 -}}{{ $gpus }}{{- else if gt $tp 1 -}}{{ $tp }}{{- else -}}0{{- end -}}
{{- end -}}

{{- define "oai-server.image" -}}
{{- $flavor := ternary "cuda" "cpu" (gt (include "oai-server.gpus" . | int) 0) -}}
{{- $tag := .Values.image.tag | default (printf "%s-%s" .Chart.AppVersion $flavor) -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* Seconds the server drains after SIGTERM: the drainTimeout setting, else its default. */}}
{{- define "oai-server.drainTimeout" -}}
{{- .Values.server.drainTimeout | default 30 | int -}}
{{- end -}}

{{- define "oai-server.terminationGracePeriodSeconds" -}}
{{- $drain := include "oai-server.drainTimeout" . | int -}}
{{- $preStop := .Values.preStopSleepSeconds | int -}}
{{- $grace := .Values.terminationGracePeriodSeconds | default (add $preStop $drain 15) | int -}}
{{- if le $grace (add $preStop $drain) -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + server.drainTimeout (%d)" $grace (add $preStop $drain)) -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{- define "oai-server.claimName" -}}
{{- .Values.modelCache.persistence.existingClaim | default (printf "%s-models" (include "oai-server.fullname" .)) -}}
{{- end -}}
