using Azure.Messaging.ServiceBus;
using Xunit;

namespace ServiceBusClientConformance;

/// <summary>
/// The four wire-level defects that stopped the .NET client (and so `func start`) from using the
/// emulator at all. Each failed before its fix; see the emulator's README.
/// </summary>
[Collection(EmulatorCollection.Name)]
public sealed class WireDefectTests(EmulatorFixture emulator)
{
    private static readonly TimeSpan Wait = TimeSpan.FromSeconds(10);

    [Fact]
    public async Task Signs_in_with_the_clients_only_sasl_mechanism_MSSBCBS()
    {
        // The client offers only MSSBCBS; a broker offering ANONYMOUS and PLAIN ends sign-in.
        await using var client = emulator.CreateClient();
        await client.CreateSender("wire-sasl").SendMessageAsync(new ServiceBusMessage("hello"));
        var receiver = client.CreateReceiver("wire-sasl");
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.NotNull(got);
        Assert.Equal("hello", got.Body.ToString());
        await receiver.CompleteMessageAsync(got);
    }

    [Fact]
    public async Task Cbs_and_management_replies_carry_int32_status_codes()
    {
        // The put-token reply (CBS) and a management reply (peek, schedule) are read as int32.
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("wire-status");
        await sender.SendMessageAsync(new ServiceBusMessage("peek me"));
        var receiver = client.CreateReceiver("wire-status");
        var peeked = await receiver.PeekMessageAsync();
        Assert.NotNull(peeked);
        Assert.Equal("peek me", peeked.Body.ToString());
    }

    [Fact]
    public async Task Renew_lock_answers_its_expirations_as_an_array_of_timestamps()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("wire-renew").SendMessageAsync(new ServiceBusMessage("renew"));
        var receiver = client.CreateReceiver("wire-renew");
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.NotNull(got);
        var before = got.LockedUntil;
        await Task.Delay(1200);
        await receiver.RenewMessageLockAsync(got);
        Assert.True(got.LockedUntil > before, $"lock not extended: {before:O} -> {got.LockedUntil:O}");
        await receiver.CompleteMessageAsync(got);
    }

    [Fact]
    public async Task Messages_released_unconsumed_are_not_counted_as_deliveries()
    {
        // With prefetch 0 the client releases messages that arrive after a receive call returned.
        // Service Bus raises the delivery count on abandon or lock expiry, never on release; the
        // queue's MaxDeliveryCount is 2, so counting releases dead-letters most of them.
        const int count = 50;
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("wire-release");
        using (var batch = await sender.CreateMessageBatchAsync())
        {
            for (var i = 0; i < count; i++) Assert.True(batch.TryAddMessage(new ServiceBusMessage($"m{i}")));
            await sender.SendMessagesAsync(batch);
        }
        var receiver = client.CreateReceiver("wire-release", new ServiceBusReceiverOptions { PrefetchCount = 0 });
        var seen = new Dictionary<string, int>();
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (seen.Count < count && DateTime.UtcNow < deadline)
        {
            var got = await receiver.ReceiveMessagesAsync(count, TimeSpan.FromSeconds(1));
            foreach (var m in got)
            {
                seen[m.Body.ToString()] = m.DeliveryCount;
                await receiver.CompleteMessageAsync(m);
            }
        }
        var dlq = await client.CreateReceiver("wire-release", new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter })
            .PeekMessagesAsync(count);
        Assert.Empty(dlq);
        Assert.Equal(count, seen.Count);
        Assert.All(seen.Values, c => Assert.Equal(1, c));
    }
}
