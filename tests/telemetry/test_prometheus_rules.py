# ruff: noqa: E501  (the promtool test below is YAML: a series and its labels are one line)
"""The alerting rules shipped in ``deploy/prometheus``: valid for ``promtool check rules``, and each
alert fires on the series it is about (and not below its threshold) under ``promtool test rules``
with series written here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from _prometheus_support import RULES, binary

SILENT = ("Streams ended without a finish reason or end marker (truncated, no_finish, no_done, "
          "cut_mid_frame, empty): the proxy sent its clients an error; `sseguard analyze` on its "
          "store says what the broken streams share.")
HEAL = ("Streams that needed a retry or a continuation failed anyway: the upstream fails "
        "persistently, or the --resume dialect does not fit it.")
AMPLIFICATION = ("Retries add more than 20 % to the upstream's load; past --retry-budget failures "
                 "go to clients at once, marked x-should-retry: false.")
BUDGET = ("--retry-budget refuses retries: failures reach the clients unretried, marked "
          "x-should-retry: false.")
PROBE = ("The probe's streams failed its policy (a bad ending or an untolerated finding) in more "
         "than 5 % of the last 10 minutes.")


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


UNIT_TESTS = f"""
rule_files: [{RULES}]
evaluation_interval: 1m
tests:
  # chat: 6 truncated a minute in 66 (9 %); responses: 1 in 100 (1 %, under 2 %); messages: client
  # disconnects only, which are not the upstream's silence.
  - interval: 1m
    input_series:
      - series: 'sseguard_proxy_streams_total{{api="chat",ending="truncated"}}'
        values: '0+6x20'
      - series: 'sseguard_proxy_streams_total{{api="chat",ending="complete"}}'
        values: '0+60x20'
      - series: 'sseguard_proxy_streams_total{{api="responses",ending="truncated"}}'
        values: '0+1x20'
      - series: 'sseguard_proxy_streams_total{{api="responses",ending="complete"}}'
        values: '0+99x20'
      - series: 'sseguard_proxy_streams_total{{api="messages",ending="client_disconnect"}}'
        values: '0+30x20'
      - series: 'sseguard_proxy_streams_total{{api="messages",ending="complete"}}'
        values: '0+30x20'
    alert_rule_test:
      - eval_time: 3m
        alertname: SseguardSilentEndings
        exp_alerts: []
      - eval_time: 10m
        alertname: SseguardSilentEndings
        exp_alerts:
          - exp_labels: {{api: chat, severity: warning}}
            exp_annotations:
              summary: "chat streams end silently at 9.091%"
              description: {_quoted(SILENT)}
  # Resumed chat streams: 3 of 10 still failed (30 %); messages: 1 of 10 (10 %, under 20 %).
  - interval: 1m
    input_series:
      - series: 'sseguard_proxy_healed_streams_total{{api="chat",how="resume",dialect="vllm",result="failed"}}'
        values: '0+3x30'
      - series: 'sseguard_proxy_healed_streams_total{{api="chat",how="resume",dialect="vllm",result="passed"}}'
        values: '0+7x30'
      - series: 'sseguard_proxy_healed_streams_total{{api="messages",how="retry",dialect="",result="failed"}}'
        values: '0+1x30'
      - series: 'sseguard_proxy_healed_streams_total{{api="messages",how="retry",dialect="",result="passed"}}'
        values: '0+9x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: SseguardHealFailures
        exp_alerts:
          - exp_labels: {{api: chat, severity: warning}}
            exp_annotations:
              summary: "30% of healed chat streams still failed"
              description: {_quoted(HEAL)}
  # 30 retries for 100 client streams a minute: 1.3 upstream requests each.
  - interval: 1m
    input_series:
      - series: 'sseguard_proxy_retries_total{{api="chat",reason="empty"}}'
        values: '0+30x30'
      - series: 'sseguard_proxy_requests_total{{kind="stream"}}'
        values: '0+100x30'
      - series: 'sseguard_proxy_requests_total{{kind="passthrough"}}'
        values: '0+500x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: SseguardRetryAmplification
        exp_alerts:
          - exp_labels: {{severity: warning}}
            exp_annotations:
              summary: "the proxy sends 1.30 upstream requests per client stream"
              description: {_quoted(AMPLIFICATION)}
  # 10 retries for 100 client streams a minute: 1.1, within the budget.
  - interval: 1m
    input_series:
      - series: 'sseguard_proxy_retries_total{{api="chat",reason="empty"}}'
        values: '0+10x30'
      - series: 'sseguard_proxy_requests_total{{kind="stream"}}'
        values: '0+100x30'
      - series: 'sseguard_proxy_retries_refused_total{{api="chat",reason="empty"}}'
        values: '0+1x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: SseguardRetryAmplification
        exp_alerts: []
      - eval_time: 20m
        alertname: SseguardRetryBudgetExhausted
        exp_alerts:
          - exp_labels: {{api: chat, severity: info}}
            exp_annotations:
              summary: "the retry budget refuses chat retries"
              description: {_quoted(BUDGET)}
  # The probe's OpenTelemetry metrics as Prometheus names them: 10 of 100 streams a minute failed
  # against one endpoint, 2 of 100 against another (under 5 %); the proxy's job is not the probe.
  - interval: 1m
    input_series:
      - series: 'gen_ai_client_operation_duration_seconds_count{{job="sseguard-probe",gen_ai_provider_name="openai",server_address="10.0.0.5",error_type="truncated"}}'
        values: '0+10x30'
      - series: 'gen_ai_client_operation_duration_seconds_count{{job="sseguard-probe",gen_ai_provider_name="openai",server_address="10.0.0.5"}}'
        values: '0+90x30'
      - series: 'gen_ai_client_operation_duration_seconds_count{{job="sseguard-probe",gen_ai_provider_name="openai",server_address="10.0.0.6",error_type="no_finish"}}'
        values: '0+2x30'
      - series: 'gen_ai_client_operation_duration_seconds_count{{job="sseguard-probe",gen_ai_provider_name="openai",server_address="10.0.0.6"}}'
        values: '0+98x30'
      - series: 'gen_ai_client_operation_duration_seconds_count{{job="sseguard-proxy",gen_ai_provider_name="openai",server_address="10.0.0.6",error_type="truncated"}}'
        values: '0+50x30'
    alert_rule_test:
      - eval_time: 25m
        alertname: SseguardProbeFailureRate
        exp_alerts:
          - exp_labels: {{job: sseguard-probe, gen_ai_provider_name: openai, server_address: 10.0.0.5, severity: warning}}
            exp_annotations:
              summary: "10% of probe streams to 10.0.0.5 fail"
              description: {_quoted(PROBE)}
"""


def test_the_rules_pass_promtool_check() -> None:
    out = subprocess.run([binary("promtool"), "check", "rules", str(RULES)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 5 rules found" in out.stdout


def test_each_alert_fires_on_its_series_and_not_below_its_threshold(tmp_path: Path) -> None:
    tests = tmp_path / "sseguard-alerts.test.yml"
    tests.write_text(UNIT_TESTS)
    out = subprocess.run([binary("promtool"), "test", "rules", str(tests)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
