using Azure.Messaging.ServiceBus;
using Xunit;

namespace ServiceBusClientConformance;

/// <summary>
/// A message comes out with the AMQP types it went in with: every application property type the
/// .NET client maps, through a receive, a peek, a scheduled send and a topic subscription.
/// </summary>
[Collection(EmulatorCollection.Name)]
public sealed class PropertyTypeTests(EmulatorFixture emulator)
{
    private static readonly TimeSpan Wait = TimeSpan.FromSeconds(10);

    private static Dictionary<string, object> EveryType() => new()
    {
        ["string"] = "text",
        ["bool"] = true,
        ["byte"] = (byte)200,
        ["sbyte"] = (sbyte)-5,
        ["short"] = (short)-300,
        ["ushort"] = (ushort)60000,
        ["int"] = 42,
        ["negativeInt"] = -42,
        ["uint"] = 4000000000u,
        ["long"] = 5000000000L,
        ["smallLong"] = 7L,
        ["ulong"] = 18000000000000000000ul,
        ["float"] = 1.5f,
        ["double"] = 2.25d,
        ["decimal"] = 12.34m,
        ["char"] = 'x',
        ["guid"] = Guid.Parse("0d1d8bd2-3b5c-4b43-9a56-2f0f0d7e6c11"),
        ["dateTime"] = new DateTime(2026, 11, 25, 10, 30, 0, DateTimeKind.Utc),
        ["dateTimeOffset"] = new DateTimeOffset(2026, 11, 25, 10, 30, 0, TimeSpan.Zero),
        ["timeSpan"] = TimeSpan.FromMinutes(90),
        ["uri"] = new Uri("https://example.org/orders/1"),
    };

    private static void AssertSameTypes(IReadOnlyDictionary<string, object> got)
    {
        foreach (var (key, want) in EveryType())
        {
            Assert.True(got.ContainsKey(key), $"property {key} is missing");
            Assert.Equal(want.GetType(), got[key].GetType());
            Assert.Equal(want, got[key]);
        }
    }

    private static ServiceBusMessage Typed(string body)
    {
        var message = new ServiceBusMessage(body);
        foreach (var (key, value) in EveryType()) message.ApplicationProperties[key] = value;
        return message;
    }

    [Fact]
    public async Task Received_and_peeked_messages_keep_every_property_type()
    {
        await using var client = emulator.CreateClient();
        await client.CreateSender("wire-props").SendMessageAsync(Typed("typed"));
        var receiver = client.CreateReceiver("wire-props");
        var peeked = await receiver.PeekMessageAsync();
        Assert.NotNull(peeked);
        AssertSameTypes(peeked.ApplicationProperties);
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.NotNull(got);
        AssertSameTypes(got.ApplicationProperties);
        // Abandoned with a property of its own: the others keep their types.
        await receiver.AbandonMessageAsync(got, new Dictionary<string, object> { ["note"] = 3 });
        var again = await receiver.ReceiveMessageAsync(Wait);
        Assert.NotNull(again);
        AssertSameTypes(again.ApplicationProperties);
        Assert.Equal(3, again.ApplicationProperties["note"]);
        await receiver.CompleteMessageAsync(again);
    }

    [Fact]
    public async Task Scheduled_messages_keep_every_property_type_and_answer_their_sequence_number()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("wire-schedule");
        // The reply's sequence-numbers must be an AMQP array of longs, or the client throws
        // after the message was scheduled (and a caller that retries schedules it twice).
        var seq = await sender.ScheduleMessageAsync(Typed("later"), DateTimeOffset.UtcNow.AddSeconds(1));
        Assert.True(seq > 0);
        var got = await client.CreateReceiver("wire-schedule").ReceiveMessageAsync(Wait);
        Assert.NotNull(got);
        Assert.Equal(seq, got.SequenceNumber);
        AssertSameTypes(got.ApplicationProperties);
    }

    [Fact]
    public async Task Topic_subscriptions_filter_on_typed_properties_and_keep_their_types()
    {
        await using var client = emulator.CreateClient();
        var sender = client.CreateSender("orders-topic");
        var big = Typed("big");
        big.ApplicationProperties["amount"] = 250;
        big.ApplicationProperties["region"] = "eu";
        var small = Typed("small");
        small.ApplicationProperties["amount"] = 20;
        small.ApplicationProperties["region"] = "eu";
        await sender.SendMessagesAsync([big, small]);
        var receiver = client.CreateReceiver("orders-topic", "big-orders");
        var got = await receiver.ReceiveMessageAsync(Wait);
        Assert.NotNull(got);
        Assert.Equal("big", got.Body.ToString());
        Assert.Equal(250, got.ApplicationProperties["amount"]);
        AssertSameTypes(got.ApplicationProperties);
        await receiver.CompleteMessageAsync(got);
        Assert.Null(await receiver.ReceiveMessageAsync(TimeSpan.FromSeconds(1)));
        // Drain the catch-all subscription so other tests see an empty one.
        var all = client.CreateReceiver("orders-topic", "everything", new ServiceBusReceiverOptions { ReceiveMode = ServiceBusReceiveMode.ReceiveAndDelete });
        var drained = 0;
        while (drained < 2 && await all.ReceiveMessageAsync(TimeSpan.FromSeconds(2)) is not null) drained++;
        Assert.Equal(2, drained);
    }
}
