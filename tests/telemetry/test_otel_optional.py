"""OpenTelemetry is an optional extra: nothing of it is imported unless ``--otel``/``otel=`` asks for
it, and asking without the extra is one line naming it, exit status 2."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from sseguard.cli import app


def test_no_module_imports_opentelemetry_unless_asked() -> None:
    code = textwrap.dedent("""
        import sys
        import sseguard, sseguard.client, sseguard.proxy, sseguard.probe, sseguard.telemetry
        import sseguard.telemetry.genai, sseguard.proxy.driver.traces, sseguard.cli
        from sseguard.proxy.driver.app import make_proxy_app
        from sseguard.proxy.config import ProxyConfig
        from sseguard.client import StrictTransport
        make_proxy_app(ProxyConfig.from_options(upstream="http://127.0.0.1:9/v1", store=None))
        StrictTransport()
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
        print(loaded)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_otel_flag_without_the_extra_is_one_line_exit_2() -> None:
    code = textwrap.dedent("""
        import sys
        sys.modules["opentelemetry.sdk"] = None  # the extra is not installed
        from sseguard.cli import main
        sys.argv = ["sseguard", "proxy", "--upstream", "http://127.0.0.1:9/v1", "--otel",
                    "--store", "none"]
        main()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "sseguard[otel]" in lines[0], out.stderr


def test_an_otlp_protocol_sseguard_cannot_export_with_is_one_line_exit_2(monkeypatch: object) -> None:
    import pytest

    pytest.importorskip("opentelemetry.sdk")
    runner = CliRunner()
    result = runner.invoke(app, ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--otel",
                                 "--store", "none"],
                           env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert result.exit_code == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'" in result.output


def test_a_share_of_healthy_spans_outside_0_to_1_is_one_line_exit_2() -> None:
    import pytest

    pytest.importorskip("opentelemetry.sdk")
    result = CliRunner().invoke(app, ["probe", "--arm", "a=http://127.0.0.1:9/v1", "--otel"],
                                env={"SSEGUARD_OTEL_HEALTHY_SPANS": "1.5"})
    assert result.exit_code == 2
    assert "SSEGUARD_OTEL_HEALTHY_SPANS='1.5'" in result.output


def test_the_environment_is_checked_as_opentelemetry_reads_it() -> None:
    import pytest

    pytest.importorskip("opentelemetry.sdk")
    from sseguard.core.errors import ConfigError
    from sseguard.telemetry.otel import check_environment

    check_environment({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    # A protocol sseguard cannot export with matters only where an otlp exporter is asked for.
    check_environment({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_TRACES_EXPORTER": "none",
                       "OTEL_METRICS_EXPORTER": "console"})
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"):
        check_environment({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"})
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER=zipkin"):
        check_environment({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(ConfigError, match="SSEGUARD_OTEL_HEALTHY_SPANS='some'"):
        check_environment({"SSEGUARD_OTEL_HEALTHY_SPANS": "some"})
