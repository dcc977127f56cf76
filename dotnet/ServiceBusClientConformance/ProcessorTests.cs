using System.Collections.Concurrent;
using System.Text.Json;
using Azure.Messaging.ServiceBus;
using Xunit;

namespace ServiceBusClientConformance;

/// <summary>
/// A ServiceBusProcessor set up as the Functions host sets it up from this app's host.json
/// (extensions.serviceBus), the way `func start` reads the Scheduler's and Agents' queues.
/// </summary>
[Collection(EmulatorCollection.Name)]
public sealed class ProcessorTests(EmulatorFixture emulator)
{
    private static ServiceBusProcessorOptions FromHostJson()
    {
        var repo = new DirectoryInfo(AppContext.BaseDirectory);
        while (!File.Exists(Path.Combine(repo.FullName, "host.json"))) repo = repo.Parent!;
        using var doc = JsonDocument.Parse(File.ReadAllText(Path.Combine(repo.FullName, "host.json")));
        var sb = doc.RootElement.GetProperty("extensions").GetProperty("serviceBus");
        return new ServiceBusProcessorOptions
        {
            PrefetchCount = sb.GetProperty("prefetchCount").GetInt32(),
            AutoCompleteMessages = sb.GetProperty("autoCompleteMessages").GetBoolean(),
            MaxAutoLockRenewalDuration = TimeSpan.Parse(sb.GetProperty("maxAutoLockRenewalDuration").GetString()!),
            MaxConcurrentCalls = sb.GetProperty("maxConcurrentCalls").GetInt32(),
        };
    }

    [Fact]
    public async Task Processes_500_messages_none_lost_none_settled_twice_with_slow_ones_kept_by_renewal()
    {
        const int count = 500;
        // The queue's lock is 5 s; these handlers take 7 s and keep their lock by auto-renewal.
        var slow = new HashSet<string> { "7", "250", "499" };
        var options = FromHostJson();
        Assert.True(options.AutoCompleteMessages);
        Assert.True(options.MaxConcurrentCalls > 1);
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("processor");
        for (var start = 0; start < count; start += 100)
            await sender.SendMessagesAsync(Enumerable.Range(start, 100).Select(i => new ServiceBusMessage($"{i}") { MessageId = $"{i}" }));

        var handled = new ConcurrentDictionary<string, int>();
        var errors = new ConcurrentQueue<string>();
        var inFlight = 0;
        var maxInFlight = 0;
        var done = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        await using var processor = client.CreateProcessor("processor", options);
        processor.ProcessMessageAsync += async args =>
        {
            var now = Interlocked.Increment(ref inFlight);
            InterlockedMax(ref maxInFlight, now);
            try
            {
                if (slow.Contains(args.Message.MessageId)) await Task.Delay(TimeSpan.FromSeconds(7));
                if (args.Message.DeliveryCount != 1) errors.Enqueue($"{args.Message.MessageId} delivered {args.Message.DeliveryCount} times");
                if (handled.AddOrUpdate(args.Message.MessageId, 1, (_, n) => n + 1) == 1 && handled.Count == count)
                    done.TrySetResult();
            }
            finally
            {
                Interlocked.Decrement(ref inFlight);
            }
        };
        processor.ProcessErrorAsync += args =>
        {
            errors.Enqueue($"{args.ErrorSource}: {args.Exception.Message}");
            return Task.CompletedTask;
        };
        await processor.StartProcessingAsync();
        var finished = await Task.WhenAny(done.Task, Task.Delay(TimeSpan.FromSeconds(90)));
        // Let auto-complete of the last handlers land before stopping.
        await Task.Delay(1000);
        await processor.StopProcessingAsync();

        Assert.True(finished == done.Task, $"handled {handled.Count} of {count}");
        Assert.Empty(errors);
        Assert.All(handled, kv => Assert.Equal(1, kv.Value));
        Assert.True(maxInFlight > 1 && maxInFlight <= options.MaxConcurrentCalls, $"at most {maxInFlight} at once");
        var receiver = client.CreateReceiver("processor");
        Assert.Empty(await receiver.PeekMessagesAsync(10, fromSequenceNumber: 0));
        var dlq = client.CreateReceiver("processor", new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter });
        Assert.Empty(await dlq.PeekMessagesAsync(10, fromSequenceNumber: 0));
    }

    private static void InterlockedMax(ref int target, int value)
    {
        int seen;
        while ((seen = Volatile.Read(ref target)) < value && Interlocked.CompareExchange(ref target, value, seen) != seen) { }
    }
}
