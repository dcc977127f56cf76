/**
 * A Service Bus emulator Config.json (the official emulator's format) with the given queues and
 * topics: short locks and few deliveries, so a test sees redelivery quickly.
 */
export function emulatorConfig(entities: { queues: string[]; topics?: Record<string, string[]> }): object {
  const queueProperties = {
    DeadLetteringOnMessageExpiration: false,
    DefaultMessageTimeToLive: 'PT1H',
    DuplicateDetectionHistoryTimeWindow: 'PT5M',
    ForwardDeadLetteredMessagesTo: '',
    ForwardTo: '',
    LockDuration: 'PT5S',
    MaxDeliveryCount: 3,
    RequiresDuplicateDetection: false,
    RequiresSession: false,
  };
  return {
    UserConfig: {
      Namespaces: [
        {
          Name: 'sbemulatorns',
          Queues: entities.queues.map((Name) => ({ Name, Properties: queueProperties })),
          Topics: Object.entries(entities.topics ?? {}).map(([Name, subscriptions]) => ({
            Name,
            Properties: { DefaultMessageTimeToLive: 'PT1H', RequiresDuplicateDetection: false },
            Subscriptions: subscriptions.map((sub) => ({
              Name: sub,
              Properties: {
                DefaultMessageTimeToLive: 'PT1H',
                LockDuration: 'PT5S',
                MaxDeliveryCount: 3,
                RequiresSession: false,
              },
            })),
          })),
        },
      ],
      Logging: { Type: 'Console' },
    },
  };
}
