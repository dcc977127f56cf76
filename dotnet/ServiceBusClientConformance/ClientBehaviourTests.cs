using Azure.Messaging.ServiceBus;
using Xunit;

namespace ServiceBusClientConformance;

/// <summary>
/// What the .NET client does with Service Bus, against the emulator: each queue in Config.json
/// belongs to one test, so the tests run in any order.
/// </summary>
[Collection(EmulatorCollection.Name)]
public sealed class ClientBehaviourTests(EmulatorFixture emulator)
{
    private static readonly TimeSpan Wait = TimeSpan.FromSeconds(10);

    private static async Task<List<ServiceBusReceivedMessage>> ReceiveAll(
        ServiceBusReceiver receiver, int count, TimeSpan? within = null)
    {
        var got = new List<ServiceBusReceivedMessage>();
        var deadline = DateTime.UtcNow + (within ?? TimeSpan.FromSeconds(30));
        while (got.Count < count && DateTime.UtcNow < deadline)
            got.AddRange(await receiver.ReceiveMessagesAsync(count - got.Count, TimeSpan.FromSeconds(1)));
        return got;
    }

    [Fact]
    public async Task Batches_hold_what_fits_in_256_KB_and_arrive_whole()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("send-batch");
        using var batch = await sender.CreateMessageBatchAsync();
        Assert.Equal(256 * 1024, batch.MaxSizeInBytes);
        Assert.False(batch.TryAddMessage(new ServiceBusMessage(new byte[300 * 1024])));
        for (var i = 0; i < 10; i++) Assert.True(batch.TryAddMessage(new ServiceBusMessage($"b{i}")));
        await sender.SendMessagesAsync(batch);
        var tooBig = await Assert.ThrowsAsync<ServiceBusException>(
            () => sender.SendMessageAsync(new ServiceBusMessage(new byte[300 * 1024])));
        Assert.Equal(ServiceBusFailureReason.MessageSizeExceeded, tooBig.Reason);
        var got = await ReceiveAll(client.CreateReceiver("send-batch", new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete }), 10);
        Assert.Equal(Enumerable.Range(0, 10).Select(i => $"b{i}"), got.Select(m => m.Body.ToString()));
    }

    [Fact]
    public async Task Peek_reads_from_a_sequence_number_without_locking()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("peek");
        await sender.SendMessagesAsync(Enumerable.Range(0, 5).Select(i => new ServiceBusMessage($"p{i}") { MessageId = $"p{i}" }));
        var receiver = client.CreateReceiver("peek");
        var all = await receiver.PeekMessagesAsync(10, fromSequenceNumber: 0);
        Assert.Equal(5, all.Count);
        var tail = await receiver.PeekMessagesAsync(10, fromSequenceNumber: all[2].SequenceNumber);
        Assert.Equal(new[] { "p2", "p3", "p4" }, tail.Select(m => m.MessageId));
        // Peeking locked nothing: all five can be received now.
        var got = await ReceiveAll(receiver, 5);
        Assert.Equal(5, got.Count);
        foreach (var m in got) await receiver.CompleteMessageAsync(m);
        Assert.Empty(await receiver.PeekMessagesAsync(10, fromSequenceNumber: 0));
    }

    [Fact]
    public async Task Complete_removes_and_abandon_returns_with_the_delivery_count_raised()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("settle").SendMessageAsync(new ServiceBusMessage("again") { MessageId = "s1" });
        var receiver = client.CreateReceiver("settle");
        var first = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal(1, first.DeliveryCount);
        await receiver.AbandonMessageAsync(first);
        var second = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal("s1", second.MessageId);
        Assert.Equal(2, second.DeliveryCount);
        await receiver.CompleteMessageAsync(second);
        Assert.Null(await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(1)));
        var lost = await Assert.ThrowsAsync<ServiceBusException>(() => receiver.CompleteMessageAsync(second));
        Assert.Equal(ServiceBusFailureReason.MessageLockLost, lost.Reason);
    }

    [Fact]
    public async Task Dead_letter_keeps_reason_description_and_properties()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("deadletter").SendMessageAsync(new ServiceBusMessage("bad") { MessageId = "d1" });
        var receiver = client.CreateReceiver("deadletter");
        var got = await receiver.ReceiveMessageAsync(Wait);
        await receiver.DeadLetterMessageAsync(got, new Dictionary<string, object> { ["attempts"] = 3, ["by"] = "test" },
            "BadOrder", "the order id is not a UUID");
        var dlq = client.CreateReceiver("deadletter", new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter });
        var dead = await dlq.ReceiveMessageAsync(Wait);
        Assert.NotNull(dead);
        Assert.Equal("d1", dead.MessageId);
        Assert.Equal("BadOrder", dead.DeadLetterReason);
        Assert.Equal("the order id is not a UUID", dead.DeadLetterErrorDescription);
        Assert.Equal(3, dead.ApplicationProperties["attempts"]);
        Assert.Equal("test", dead.ApplicationProperties["by"]);
        await dlq.CompleteMessageAsync(dead);
    }

    [Fact]
    public async Task MaxDeliveryCount_moves_a_message_to_the_dead_letter_queue()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("maxdelivery").SendMessageAsync(new ServiceBusMessage("poison") { MessageId = "m1" });
        var receiver = client.CreateReceiver("maxdelivery");
        for (var i = 1; i <= 3; i++)
        {
            var got = await receiver.ReceiveMessageAsync(Wait);
            Assert.NotNull(got);
            Assert.Equal(i, got.DeliveryCount);
            await receiver.AbandonMessageAsync(got);
        }
        Assert.Null(await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(1)));
        var dead = await client.CreateReceiver("maxdelivery", new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter })
            .ReceiveMessageAsync(Wait);
        Assert.NotNull(dead);
        Assert.Equal("MaxDeliveryCountExceeded", dead.DeadLetterReason);
    }

    [Fact]
    public async Task A_lock_is_kept_by_renewal_and_lost_when_it_expires()
    {
        // LockDuration is 2 s on this queue.
        await using var client = emulator.CreateClient();
        await client.CreateSender("lock-expiry").SendMessagesAsync([new ServiceBusMessage("kept"), new ServiceBusMessage("lost")]);
        var receiver = client.CreateReceiver("lock-expiry");
        var kept = await receiver.ReceiveMessageAsync(Wait);
        var lost = await receiver.ReceiveMessageAsync(Wait);
        // Renewed every 0.5 s for 3 s: a renewal every 1 s lost the 2 s lock once in CI when the
        // machine was loaded (a round trip of over 1 s).
        for (var i = 0; i < 6; i++)
        {
            await Task.Delay(500);
            await receiver.RenewMessageLockAsync(kept);
        }
        await receiver.CompleteMessageAsync(kept);
        var error = await Assert.ThrowsAsync<ServiceBusException>(() => receiver.CompleteMessageAsync(lost));
        Assert.Equal(ServiceBusFailureReason.MessageLockLost, error.Reason);
        var back = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal("lost", back.Body.ToString());
        Assert.Equal(2, back.DeliveryCount);
        await receiver.CompleteMessageAsync(back);
    }

    [Fact]
    public async Task Scheduled_messages_arrive_when_due_and_cancelled_ones_never()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("schedule-cancel");
        // Due 5 s out: due at 2 s, a loaded machine (CI) took over 1 s to schedule, peek and
        // cancel, and the wait for nothing before the due time ran past it.
        var due = DateTimeOffset.UtcNow.AddSeconds(5);
        var keep = await sender.ScheduleMessageAsync(new ServiceBusMessage("keep"), due);
        var drop = await sender.ScheduleMessageAsync(new ServiceBusMessage("drop"), due);
        Assert.NotEqual(keep, drop);
        var receiver = client.CreateReceiver("schedule-cancel");
        var peeked = await receiver.PeekMessageAsync(fromSequenceNumber: keep);
        Assert.Equal(ServiceBusMessageState.Scheduled, peeked.State);
        await sender.CancelScheduledMessageAsync(drop);
        // Nothing until shortly before the due time.
        var early = due - DateTimeOffset.UtcNow - TimeSpan.FromMilliseconds(500);
        Assert.True(early > TimeSpan.Zero, $"scheduling, peeking and cancelling took past {due:O}");
        Assert.Null(await receiver.ReceiveMessageAsync(early));
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal("keep", got.Body.ToString());
        Assert.True(got.EnqueuedTime >= due.AddMilliseconds(-100), $"{got.EnqueuedTime:O} before {due:O}");
        await receiver.CompleteMessageAsync(got);
        Assert.Null(await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(2)));
    }

    [Fact]
    public async Task Deferred_messages_are_received_by_sequence_number()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("defer").SendMessageAsync(new ServiceBusMessage("later"));
        var receiver = client.CreateReceiver("defer");
        var got = await receiver.ReceiveMessageAsync(Wait);
        await receiver.DeferMessageAsync(got);
        Assert.Null(await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(1)));
        var deferred = await receiver.ReceiveDeferredMessageAsync(got.SequenceNumber);
        Assert.Equal("later", deferred.Body.ToString());
        Assert.Equal(ServiceBusMessageState.Deferred, deferred.State);
        await receiver.CompleteMessageAsync(deferred);
        await Assert.ThrowsAsync<ServiceBusException>(() => receiver.ReceiveDeferredMessageAsync(got.SequenceNumber));
    }

    [Fact]
    public async Task Duplicate_detection_drops_a_resent_message_id()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("dedup");
        await sender.SendMessageAsync(new ServiceBusMessage("one") { MessageId = "order-1:payment:1" });
        await sender.SendMessageAsync(new ServiceBusMessage("two") { MessageId = "order-1:payment:1" });
        await sender.SendMessageAsync(new ServiceBusMessage("three") { MessageId = "order-2:payment:1" });
        var got = await ReceiveAll(client.CreateReceiver("dedup", new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete }), 3, TimeSpan.FromSeconds(4));
        Assert.Equal(new[] { "one", "three" }, got.Select(m => m.Body.ToString()));
    }

    [Fact]
    public async Task An_expired_message_is_dead_lettered_not_delivered()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("ttl");
        await sender.SendMessageAsync(new ServiceBusMessage("stale") { TimeToLive = TimeSpan.FromMilliseconds(500) });
        await sender.SendMessageAsync(new ServiceBusMessage("fresh"));
        await Task.Delay(1000);
        var receiver = client.CreateReceiver("ttl");
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal("fresh", got.Body.ToString());
        await receiver.CompleteMessageAsync(got);
        var dead = await client.CreateReceiver("ttl", new ServiceBusReceiverOptions { SubQueue = SubQueue.DeadLetter }).ReceiveMessageAsync(Wait);
        Assert.Equal("stale", dead.Body.ToString());
        Assert.Equal("TTLExpiredException", dead.DeadLetterReason);
    }

    [Fact]
    public async Task Topic_subscriptions_apply_sql_and_correlation_filters()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("orders-topic");
        var express = new ServiceBusMessage("express") { Subject = "express" };
        express.ApplicationProperties["priority"] = "high";
        var normal = new ServiceBusMessage("normal") { Subject = "express" };
        normal.ApplicationProperties["priority"] = "low";
        var usBig = new ServiceBusMessage("us-big");
        usBig.ApplicationProperties["amount"] = 500;
        usBig.ApplicationProperties["region"] = "us";
        await sender.SendMessagesAsync([express, normal, usBig]);
        var rad = new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete };
        var exp = await ReceiveAll(client.CreateReceiver("orders-topic", "express", rad), 2, TimeSpan.FromSeconds(3));
        Assert.Equal(new[] { "express" }, exp.Select(m => m.Body.ToString()));
        Assert.Null(await client.CreateReceiver("orders-topic", "big-orders", rad).ReceiveMessageAsync(TimeSpan.FromSeconds(1)));
        var all = await ReceiveAll(client.CreateReceiver("orders-topic", "everything", rad), 3);
        Assert.Equal(3, all.Count);
    }

    [Fact]
    public async Task Receive_and_delete_removes_on_delivery()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("receive-delete").SendMessageAsync(new ServiceBusMessage("once"));
        var receiver = client.CreateReceiver("receive-delete", new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete });
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.Equal("once", got.Body.ToString());
        await Assert.ThrowsAsync<InvalidOperationException>(() => receiver.CompleteMessageAsync(got));
        Assert.Empty(await receiver.PeekMessagesAsync(10, fromSequenceNumber: 0));
    }

    [Theory]
    [InlineData("batch-prefetch0", 0)]
    [InlineData("batch-prefetch", 20)]
    public async Task Batch_receive_gets_every_message_once(string queue, int prefetch)
    {
        const int count = 100;
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender(queue);
        await sender.SendMessagesAsync(Enumerable.Range(0, count).Select(i => new ServiceBusMessage($"{i}") { MessageId = $"{i}" }));
        var receiver = client.CreateReceiver(queue, new ServiceBusReceiverOptions { PrefetchCount = prefetch });
        var seen = new HashSet<string>();
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (seen.Count < count && DateTime.UtcNow < deadline)
        {
            foreach (var m in await receiver.ReceiveMessagesAsync(16, TimeSpan.FromSeconds(1)))
            {
                Assert.True(seen.Add(m.MessageId), $"{m.MessageId} delivered twice");
                Assert.Equal(1, m.DeliveryCount);
                await receiver.CompleteMessageAsync(m);
            }
        }
        Assert.Equal(count, seen.Count);
        await receiver.CloseAsync();
        Assert.Empty(await client.CreateReceiver(queue).PeekMessagesAsync(10, fromSequenceNumber: 0));
    }
}
