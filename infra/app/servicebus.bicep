// Service Bus namespace whose queues, topics and subscriptions come from the local emulator's
// declaration, so the cloud and the local stack cannot drift: change Config.json, and both
// change. Standard tier: topics and duplicate detection need it. SAS is disabled.
param name string
param location string
param tags object

// Loaded when the Bicep file is compiled; the path is relative to this file.
var emulatorConfig = loadJsonContent('../servicebus-emulator/Config.json')
var entities = emulatorConfig.UserConfig.Namespaces[0]

// Topic subscriptions flattened to one list, because a resource loop cannot nest.
var topicSubscriptions = flatten(map(entities.Topics, topic => map(topic.Subscriptions, subscription => {
  topicName: topic.Name
  Name: subscription.Name
  Properties: subscription.Properties
})))

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

resource queues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = [for queue in entities.Queues: {
  parent: namespace
  name: queue.Name
  properties: {
    deadLetteringOnMessageExpiration: queue.Properties.DeadLetteringOnMessageExpiration
    defaultMessageTimeToLive: queue.Properties.DefaultMessageTimeToLive
    duplicateDetectionHistoryTimeWindow: queue.Properties.DuplicateDetectionHistoryTimeWindow
    forwardDeadLetteredMessagesTo: empty(queue.Properties.?ForwardDeadLetteredMessagesTo ?? '') ? null : queue.Properties.?ForwardDeadLetteredMessagesTo
    forwardTo: empty(queue.Properties.?ForwardTo ?? '') ? null : queue.Properties.?ForwardTo
    lockDuration: queue.Properties.LockDuration
    maxDeliveryCount: queue.Properties.MaxDeliveryCount
    requiresDuplicateDetection: queue.Properties.RequiresDuplicateDetection
    requiresSession: queue.Properties.RequiresSession
  }
}]

resource topics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = [for topic in entities.Topics: {
  parent: namespace
  name: topic.Name
  properties: {
    defaultMessageTimeToLive: topic.Properties.DefaultMessageTimeToLive
    duplicateDetectionHistoryTimeWindow: topic.Properties.DuplicateDetectionHistoryTimeWindow
    requiresDuplicateDetection: topic.Properties.RequiresDuplicateDetection
  }
}]

resource subscriptions 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' = [for subscription in topicSubscriptions: {
  name: '${namespace.name}/${subscription.topicName}/${subscription.Name}'
  properties: {
    deadLetteringOnMessageExpiration: subscription.Properties.DeadLetteringOnMessageExpiration
    defaultMessageTimeToLive: subscription.Properties.DefaultMessageTimeToLive
    forwardDeadLetteredMessagesTo: empty(subscription.Properties.?ForwardDeadLetteredMessagesTo ?? '') ? null : subscription.Properties.?ForwardDeadLetteredMessagesTo
    forwardTo: empty(subscription.Properties.?ForwardTo ?? '') ? null : subscription.Properties.?ForwardTo
    lockDuration: subscription.Properties.LockDuration
    maxDeliveryCount: subscription.Properties.MaxDeliveryCount
    requiresSession: subscription.Properties.RequiresSession
  }
  dependsOn: [topics]
}]

output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
