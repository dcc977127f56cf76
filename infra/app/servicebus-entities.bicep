// Queues, topics, subscriptions and subscription rules of one Service Bus namespace, created
// from one namespace of a Service Bus emulator Config.json (Microsoft's format). Shared by
// app/servicebus.bicep (the app's Config.json) and conformance/main.bicep (the conformance
// fixture), so both map the file the same way; test/infra/drift.test.ts checks the mapping.
@description('Name of an existing Service Bus namespace (Standard or Premium: topics, sessions and duplicate detection need it).')
param namespaceName string

@description('One element of Config.json UserConfig.Namespaces: { Queues: [...], Topics: [...] }.')
param entities object

@description('True in a partitioned Premium namespace, where every queue and topic must be partitioned.')
param partitioned bool = false

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: namespaceName
}

// Topic subscriptions flattened to one list, because a resource loop cannot nest.
var topicSubscriptions = flatten(map(entities.Topics, topic => map(topic.Subscriptions, subscription => {
  topicName: topic.Name
  Name: subscription.Name
  Properties: subscription.Properties
  Rules: subscription.?Rules ?? []
})))

// Subscription rules flattened the same way. A subscription without rules keeps the $Default
// (match-all) rule that Service Bus creates with it, as the emulator does.
var subscriptionRules = flatten(map(topicSubscriptions, subscription => map(subscription.Rules, rule => {
  topicName: subscription.topicName
  subscriptionName: subscription.Name
  Name: rule.Name
  Properties: rule.Properties
})))

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
    enablePartitioning: partitioned ? true : null
  }
}]

resource topics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' = [for topic in entities.Topics: {
  parent: namespace
  name: topic.Name
  properties: {
    defaultMessageTimeToLive: topic.Properties.DefaultMessageTimeToLive
    duplicateDetectionHistoryTimeWindow: topic.Properties.DuplicateDetectionHistoryTimeWindow
    requiresDuplicateDetection: topic.Properties.RequiresDuplicateDetection
    enablePartitioning: partitioned ? true : null
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
  // Forwarding targets (queues) must exist before a subscription names them.
  dependsOn: [topics, queues]
}]

// Config.json rule format (Microsoft's emulator schema): Properties.FilterType 'Correlation' with
// Properties.CorrelationFilter { ContentType, CorrelationId, Label, MessageId, ReplyTo,
// ReplyToSessionId, SessionId, To, Properties }, or 'Sql' with Properties.SqlFilter.SqlExpression;
// optional Properties.Action.SqlExpression. ARM: filterType 'CorrelationFilter' | 'SqlFilter'.
// Subject is the emulator's alias for Label (the SDK's name for the same message property).
resource rules 'Microsoft.ServiceBus/namespaces/topics/subscriptions/rules@2024-01-01' = [for rule in subscriptionRules: {
  name: '${namespace.name}/${rule.topicName}/${rule.subscriptionName}/${rule.Name}'
  properties: {
    filterType: rule.Properties.FilterType == 'Correlation' ? 'CorrelationFilter' : 'SqlFilter'
    correlationFilter: rule.Properties.FilterType != 'Correlation' ? null : {
      contentType: rule.Properties.?CorrelationFilter.?ContentType
      correlationId: rule.Properties.?CorrelationFilter.?CorrelationId
      label: rule.Properties.?CorrelationFilter.?Label ?? rule.Properties.?CorrelationFilter.?Subject
      messageId: rule.Properties.?CorrelationFilter.?MessageId
      properties: rule.Properties.?CorrelationFilter.?Properties
      replyTo: rule.Properties.?CorrelationFilter.?ReplyTo
      replyToSessionId: rule.Properties.?CorrelationFilter.?ReplyToSessionId
      sessionId: rule.Properties.?CorrelationFilter.?SessionId
      to: rule.Properties.?CorrelationFilter.?To
    }
    sqlFilter: rule.Properties.FilterType != 'Sql' ? null : {
      sqlExpression: rule.Properties.?SqlFilter.?SqlExpression
    }
    action: empty(rule.Properties.?Action.?SqlExpression ?? '') ? null : {
      sqlExpression: rule.Properties.?Action.?SqlExpression
    }
  }
  dependsOn: [subscriptions]
}]
