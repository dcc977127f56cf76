// A Service Bus namespace for the emulator's conformance suite (npm run test:conformance), with
// the fixture's entities from emulators/servicebus/conformance/Config.json, mapped exactly as the
// app's (app/servicebus-entities.bicep). Deploy it into a resource group of its own:
//
//   az deployment group create -g <rg> -f infra/conformance/main.bicep -p principalId=<object id>
//
// SAS is disabled: the suite signs in with Entra ID (SERVICEBUS_CONFORMANCE_NAMESPACE and
// DefaultAzureCredential), and principalId gets Data Sender and Data Receiver on each fixture
// entity. Nothing here has been deployed from this repository's environment (no Azure access).
targetScope = 'resourceGroup'

@description('Namespace name (globally unique, 6-50 characters).')
@minLength(6)
@maxLength(50)
param namespaceName string = 'sbconf-${uniqueString(resourceGroup().id)}'

@description('Create the namespace (true), or add the fixture entities to an existing namespace of that name in this resource group (false). Must be Standard or Premium.')
param createNamespace bool = true

param location string = resourceGroup().location

@description('Object id of the user, group or service principal that runs the suite.')
param principalId string

@allowed(['User', 'ServicePrincipal', 'Group'])
param principalType string = 'User'

// Loaded when the Bicep file is compiled; the path is relative to this file.
var fixtureConfig = loadJsonContent('../../emulators/servicebus/conformance/Config.json')
var fixture = fixtureConfig.UserConfig.Namespaces[0]

// Built-in role definition ids (Azure built-in roles reference, "Integration" section).
var roles = {
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
}

// Standard is the cheapest tier with what the fixture uses: topics, sessions (conf-session),
// duplicate detection (conf-dedupe*) and auto-forwarding (conf-forward). Basic has none of them.
resource newNamespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = if (createNamespace) {
  name: namespaceName
  location: location
  tags: {
    purpose: 'servicebus-conformance'
  }
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

module entities '../app/servicebus-entities.bicep' = {
  name: 'conformance-entities'
  params: {
    namespaceName: namespaceName
    entities: fixtureConfig.UserConfig.Namespaces[0]
  }
  dependsOn: [newNamespace]
}

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: namespaceName
}

resource fixtureQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for queue in fixture.Queues: {
  parent: namespace
  name: queue.Name
}]

resource fixtureTopics 'Microsoft.ServiceBus/namespaces/topics@2024-01-01' existing = [for topic in fixture.Topics: {
  parent: namespace
  name: topic.Name
}]

// Per entity, never namespace-wide, so that adding the fixture to a shared namespace grants
// nothing on the entities already there. A role on a topic covers its subscriptions.
resource queueSend 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queue, i) in fixture.Queues: {
  name: guid(fixtureQueues[i].id, principalId, roles.serviceBusDataSender)
  scope: fixtureQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: principalId
    principalType: principalType
  }
  dependsOn: [entities]
}]

resource queueReceive 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (queue, i) in fixture.Queues: {
  name: guid(fixtureQueues[i].id, principalId, roles.serviceBusDataReceiver)
  scope: fixtureQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: principalId
    principalType: principalType
  }
  dependsOn: [entities]
}]

resource topicSend 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (topic, i) in fixture.Topics: {
  name: guid(fixtureTopics[i].id, principalId, roles.serviceBusDataSender)
  scope: fixtureTopics[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: principalId
    principalType: principalType
  }
  dependsOn: [entities]
}]

resource topicReceive 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (topic, i) in fixture.Topics: {
  name: guid(fixtureTopics[i].id, principalId, roles.serviceBusDataReceiver)
  scope: fixtureTopics[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: principalId
    principalType: principalType
  }
  dependsOn: [entities]
}]

output SERVICEBUS_CONFORMANCE_NAMESPACE string = '${namespaceName}.servicebus.windows.net'
