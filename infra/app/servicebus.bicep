// Service Bus namespace whose queues, topics, subscriptions and subscription rules come from the
// local emulator's declaration, so the cloud and the local stack cannot drift: change
// Config.json, and both change. Standard tier: topics, sessions and duplicate detection need it
// (Basic has none of them). SAS is disabled.
param name string
param location string
param tags object

// Loaded when the Bicep file is compiled; the path is relative to this file.
var emulatorConfig = loadJsonContent('../servicebus-emulator/Config.json')

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

// Every entity of the one namespace Config.json declares (the emulator reads Namespaces[0]).
module entities 'servicebus-entities.bicep' = {
  name: 'servicebus-entities'
  params: {
    namespaceName: namespace.name
    entities: emulatorConfig.UserConfig.Namespaces[0]
  }
}

output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
