/**
 * The remote wrapper for `remote-shell=powershell` (Windows remotes): a
 * PowerShell script that creates the workspace, changes into it, reads
 * env-json from stdin, reports its process id and runs the agent command;
 * and the teardown script that stops the wrapper's whole process tree.
 *
 * Every value from the config enters a script only as a PowerShell verbatim
 * string literal, and the script crosses ssh as `-EncodedCommand` (base64 of
 * UTF-16LE), so neither cmd.exe nor PowerShell as the remote's default shell
 * parses anything of it. See `docs/transport.md` ("PowerShell remotes").
 *
 * @module
 */

import type { AgentCommand } from "../agent/launch.ts";
import { RunnerError } from "../errors.ts";
import { REMOTE_PGID_MARKER, REMOTE_READY_MARKER } from "./remote_report.ts";

/** The characters PowerShell treats as a single quote (ASCII and typographic). */
const SINGLE_QUOTES = /['\u2018\u2019\u201A\u201B]/g;

/** The longest remote command line cmd.exe accepts. */
const MAX_COMMAND_LINE = 8191;

/**
 * `text` as a PowerShell verbatim string literal: inside single quotes
 * nothing is expanded, and a quote character is written twice.
 */
export function quotePowerShell(text: string): string {
  return `'${text.replace(SINGLE_QUOTES, "$&$&")}'`;
}

/**
 * Refuses agent arguments that Windows PowerShell 5.1 cannot hand to a
 * native program intact (it drops empty arguments and does not escape
 * double quotes or a trailing backslash inside the quotes it adds).
 */
export function checkPowerShellArgv(argv: string[]): void {
  argv.forEach((arg, index) => {
    const broken = arg === "" || arg.includes('"') ||
      (/\s/.test(arg) && arg.endsWith("\\"));
    if (!broken) return;
    throw new RunnerError(
      "config.invalid",
      `acp-command: word ${
        index + 1
      } is empty, contains a double quote, or contains a space and ends with a backslash; PowerShell cannot pass such an argument to a Windows program intact. Rewrite that argument, or put the command in a .cmd/.ps1 file on the remote and run that.`,
      { detail: { key: "acp-command" } },
    );
  });
}

/**
 * The wrapper script: workspace, report the pid, env from stdin (end of
 * input before the empty line that ends env-json: exit), report that env is
 * read, run the agent (a preset's own executable when the remote PATH has
 * it, else its fallback). `workspace` is absolute, `~`, `~/…` or `~\…`.
 */
export function powerShellWrapper(
  workspace: string,
  launch: Pick<AgentCommand, "argv" | "choices">,
): string {
  return [
    "$ErrorActionPreference = 'Stop'",
    "$ProgressPreference = 'SilentlyContinue'",
    `$workspace = ${quotePowerShell(workspace)}`,
    "if ($workspace -eq '~') { $workspace = $HOME }",
    "elseif ($workspace.StartsWith('~/') -or $workspace.StartsWith('~\\')) { $workspace = Join-Path $HOME $workspace.Substring(2) }",
    "try {",
    "  [void][System.IO.Directory]::CreateDirectory($workspace)",
    "  Set-Location -LiteralPath $workspace",
    "  [System.IO.Directory]::SetCurrentDirectory((Get-Location -PSProvider FileSystem).ProviderPath)",
    "} catch {",
    "  [Console]::Error.WriteLine('runner: cannot use the workspace ' + $workspace + ': ' + $_.Exception.Message)",
    "  exit 126",
    "}",
    `[Console]::Error.WriteLine('${REMOTE_PGID_MARKER} ' + $PID)`,
    "[Console]::Error.Flush()",
    "while ($true) {",
    "  $line = [Console]::In.ReadLine()",
    "  if ($null -eq $line) { exit 125 }",
    "  if ($line -eq '') { break }",
    "  $pair = [System.Text.Encoding]::UTF8.GetString([System.Convert]::FromBase64String($line))",
    "  $at = $pair.IndexOf('=')",
    "  [System.Environment]::SetEnvironmentVariable($pair.Substring(0, $at), $pair.Substring($at + 1), 'Process')",
    "}",
    `[Console]::Error.WriteLine('${REMOTE_READY_MARKER}')`,
    "[Console]::Error.Flush()",
    ...runLines(launch),
    "exit $LASTEXITCODE",
  ].join("\n");
}

function runLines(
  { argv, choices }: Pick<AgentCommand, "argv" | "choices">,
): string[] {
  const call = (command: string[]) =>
    `& ${command.map(quotePowerShell).join(" ")}`;
  if (!choices) return [call(argv)];
  return [
    `if (Get-Command -Name ${
      quotePowerShell(choices.executable[0])
    } -CommandType Application -ErrorAction SilentlyContinue) {`,
    `  ${call(choices.executable)}`,
    "} else {",
    `  ${call(choices.fallback)}`,
    "}",
  ];
}

/**
 * The teardown script: stops the process `pid` and every descendant
 * (children started after their parent, so a reused parent id is not
 * followed), then exits 0 once none is left, 1 if some survive 5 s.
 */
export function powerShellKillScript(pid: number): string {
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new RangeError(`not a process id: ${pid}`);
  }
  return [
    `$root = Get-CimInstance Win32_Process -Filter 'ProcessId = ${pid}'`,
    "if (-not $root) { exit 0 }",
    "$all = @(Get-CimInstance Win32_Process)",
    "$tree = New-Object System.Collections.Generic.List[object]",
    "$tree.Add($root)",
    "for ($i = 0; $i -lt $tree.Count; $i++) {",
    "  $parent = $tree[$i]",
    "  foreach ($p in $all) {",
    "    if ($p.ParentProcessId -eq $parent.ProcessId -and $p.ProcessId -ne $parent.ProcessId -and $p.CreationDate -ge $parent.CreationDate -and -not ($tree | Where-Object { $_.ProcessId -eq $p.ProcessId })) { $tree.Add($p) }",
    "  }",
    "}",
    "$ids = @($tree | ForEach-Object { [int]$_.ProcessId })",
    "foreach ($id in $ids) { Stop-Process -Id $id -Force -ErrorAction SilentlyContinue }",
    "for ($i = 0; $i -lt 50; $i++) {",
    "  if (-not (Get-Process -Id $ids -ErrorAction SilentlyContinue)) { exit 0 }",
    "  Start-Sleep -Milliseconds 100",
    "}",
    "exit 1",
  ].join("\n");
}

/** `script` as PowerShell's `-EncodedCommand` value: base64 of UTF-16LE. */
export function encodePowerShell(script: string): string {
  const bytes = new Uint8Array(script.length * 2);
  for (let i = 0; i < script.length; i++) {
    const unit = script.charCodeAt(i);
    bytes[2 * i] = unit & 0xff;
    bytes[2 * i + 1] = unit >> 8;
  }
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/**
 * The remote command line that runs `script` in Windows PowerShell, safe for
 * cmd.exe and PowerShell as the remote's default shell (base64 only).
 */
export function powerShellCommandLine(script: string): string {
  const line = `powershell -NoProfile -NonInteractive -EncodedCommand ${
    encodePowerShell(script)
  }`;
  if (line.length > MAX_COMMAND_LINE) {
    throw new RunnerError(
      "config.invalid",
      `acp-command: with the workspace it makes a PowerShell command line of ${line.length} characters, over the ${MAX_COMMAND_LINE} Windows accepts. Shorten the command or the workspace path.`,
      { detail: { key: "acp-command" } },
    );
  }
  return line;
}
