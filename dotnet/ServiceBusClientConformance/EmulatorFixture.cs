using System.Diagnostics;
using System.Text.RegularExpressions;
using Azure.Messaging.ServiceBus;
using Xunit;

namespace ServiceBusClientConformance;

/// <summary>
/// Starts the repo's Service Bus emulator (node dist/emulators/servicebus/cli.js, built by
/// `npm run build`) on a free port with this project's Config.json, and stops it at the end.
/// </summary>
public sealed class EmulatorFixture : IAsyncLifetime
{
    private Process? _process;
    private StreamWriter? _logFile;
    private readonly List<string> _output = new();

    public string ConnectionString { get; private set; } = "";

    public ServiceBusClient CreateClient(ServiceBusClientOptions? options = null) =>
        new(ConnectionString, options ?? new ServiceBusClientOptions());

    public async Task InitializeAsync()
    {
        var repo = RepoRoot();
        var cli = Path.Combine(repo, "dist", "emulators", "servicebus", "cli.js");
        if (!File.Exists(cli))
            throw new InvalidOperationException($"{cli} is missing: run `npm run build` in {repo} first.");
        var config = Path.Combine(AppContext.BaseDirectory, "Config.json");
        var start = new ProcessStartInfo(Environment.GetEnvironmentVariable("NODE") ?? "node")
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
            WorkingDirectory = repo,
        };
        foreach (var arg in new[] { cli, "--config", config, "--port", "0", "--host", "127.0.0.1" })
            start.ArgumentList.Add(arg);
        // EMULATOR_LOG=<file>: the emulator's verbose log, for diagnosing a failure.
        var log = Environment.GetEnvironmentVariable("EMULATOR_LOG");
        if (!string.IsNullOrEmpty(log)) start.ArgumentList.Add("--verbose");
        _logFile = string.IsNullOrEmpty(log) ? null : new StreamWriter(log) { AutoFlush = true };
        _process = Process.Start(start) ?? throw new InvalidOperationException("node did not start");
        var ready = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        _process.OutputDataReceived += (_, e) => OnLine(e.Data, ready);
        _process.ErrorDataReceived += (_, e) => OnLine(e.Data, ready);
        _process.Exited += (_, _) => ready.TrySetException(
            new InvalidOperationException("the emulator exited: " + string.Join("\n", _output)));
        _process.EnableRaisingEvents = true;
        _process.BeginOutputReadLine();
        _process.BeginErrorReadLine();
        var finished = await Task.WhenAny(ready.Task, Task.Delay(TimeSpan.FromSeconds(30)));
        if (finished != ready.Task)
            throw new TimeoutException("the emulator did not report listening within 30 s: " + string.Join("\n", _output));
        ConnectionString = await ready.Task;
    }

    private void OnLine(string? line, TaskCompletionSource<string> ready)
    {
        if (line is null) return;
        lock (_output)
        {
            if (_output.Count < 200) _output.Add(line);
            _logFile?.WriteLine(line);
        }
        var m = Regex.Match(line, @"ConnectionString=(\S+)");
        if (m.Success) ready.TrySetResult(m.Groups[1].Value);
    }

    public Task DisposeAsync()
    {
        if (_process is { HasExited: false })
        {
            _process.Kill(entireProcessTree: true);
            _process.WaitForExit(5000);
        }
        _process?.Dispose();
        _logFile?.Dispose();
        return Task.CompletedTask;
    }

    private static string RepoRoot()
    {
        var dir = new DirectoryInfo(AppContext.BaseDirectory);
        while (dir is not null && !File.Exists(Path.Combine(dir.FullName, "package.json")))
            dir = dir.Parent;
        return dir?.FullName ?? throw new InvalidOperationException("no package.json above " + AppContext.BaseDirectory);
    }
}

[CollectionDefinition(Name)]
public sealed class EmulatorCollection : ICollectionFixture<EmulatorFixture>
{
    public const string Name = "emulator";
}
