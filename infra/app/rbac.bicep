// Least-privilege role assignments. The app identity gets data-plane roles only, Service Bus
// roles scoped to each entity it receives from or sends to (never the whole namespace).
// The optional deploying user gets read-only access for debugging.
param storageAccountName string
@description('The order archive container: the app identity writes and reads it (retention).')
param archiveContainerName string = 'order-archive'
param serviceBusNamespaceName string
param applicationInsightsName string
param appPrincipalId string
@description('Queues the app receives from: those its triggers listen on, and those it pulls from with its own receiver (the Agents\' waiting queues).')
param receivesFromQueues string[]
param sendsToQueues string[]
param sendsToTopics string[]
param operatorAlertsQueue string
@description('Queues whose dead letters the operator routes read and settle (topic/subscription for subscriptions below).')
param readsDeadLettersOfQueues string[] = []
param readsDeadLettersOfSubscriptions string[] = []
param userPrincipalId string = ''
@allowed(['User', 'ServicePrincipal', 'Group'])
param userPrincipalType string = 'User'

// Built-in role definition ids, checked against the Azure built-in roles reference.
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  storageTableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6'
  storageQueueDataReader: '19e7f393-937e-4f77-808e-94535e297925'
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

// The Functions host needs blob (leases, deployment package), queue and table access on its
// storage; the state store is Table Storage on the same account.
var appStorageRoles = [
  roles.storageBlobDataOwner
  roles.storageQueueDataContributor
  roles.storageTableDataContributor
]
var userStorageRoles = [
  roles.storageTableDataReader
  roles.storageQueueDataReader
]
var withUser = !empty(userPrincipalId)

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName

  resource blobServices 'blobServices' existing = {
    name: 'default'

    resource archiveContainer 'containers' existing = {
      name: archiveContainerName
    }
  }
}

// The archive on its own: scoped to its container, so the purge's access does not hang on the
// host's account-wide role.
resource appArchive 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storageAccount::blobServices::archiveContainer.id, appPrincipalId, roles.storageBlobDataContributor)
  scope: storageAccount::blobServices::archiveContainer
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource receiveQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for queueName in receivesFromQueues: {
  parent: namespace
  name: queueName
}]

resource sendQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for queueName in sendsToQueues: {
  parent: namespace
  name: queueName
}]

resource sendTopics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = [for topicName in sendsToTopics: {
  parent: namespace
  name: topicName
}]

resource alertsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: operatorAlertsQueue
}

// Data Receiver on a queue covers its dead-letter queue. A queue the app already receives from
// (a trigger, or its own receiver) has the role (the same assignment twice would collide on its
// guid name).
var deadLetterOnlyQueues = filter(readsDeadLettersOfQueues, q => !contains(receivesFromQueues, q))

resource deadLetterQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for queueName in deadLetterOnlyQueues: {
  parent: namespace
  name: queueName
}]

resource deadLetterSubscriptions 'Microsoft.ServiceBus/namespaces/topics/subscriptions@2024-01-01' existing = [for path in readsDeadLettersOfSubscriptions: {
  name: '${serviceBusNamespaceName}/${path}'
}]

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource appStorage 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in appStorageRoles: {
  name: guid(storageAccount.id, appPrincipalId, roleId)
  scope: storageAccount
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appReceive 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in receivesFromQueues: {
  name: guid(receiveQueues[i].id, appPrincipalId, roles.serviceBusDataReceiver)
  scope: receiveQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appDeadLetterQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in deadLetterOnlyQueues: {
  name: guid(deadLetterQueues[i].id, appPrincipalId, roles.serviceBusDataReceiver)
  scope: deadLetterQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appDeadLetterSubscription 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (path, i) in readsDeadLettersOfSubscriptions: {
  name: guid(deadLetterSubscriptions[i].id, appPrincipalId, roles.serviceBusDataReceiver)
  scope: deadLetterSubscriptions[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appSendQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queueName, i) in sendsToQueues: {
  name: guid(sendQueues[i].id, appPrincipalId, roles.serviceBusDataSender)
  scope: sendQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appSendTopic 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (topicName, i) in sendsToTopics: {
  name: guid(sendTopics[i].id, appPrincipalId, roles.serviceBusDataSender)
  scope: sendTopics[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

resource appTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, appPrincipalId, roles.monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource userStorage 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for roleId in userStorageRoles: if (withUser) {
  name: guid(storageAccount.id, userPrincipalId, roleId)
  scope: storageAccount
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}]

// Lets an operator read (and settle) the alerts the Supervisor raises.
resource userAlerts 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (withUser) {
  name: guid(alertsQueue.id, userPrincipalId, roles.serviceBusDataReceiver)
  scope: alertsQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}
