// Service Bus namespace whose queues, topics, subscriptions and subscription rules come from the
// local emulator's declaration, so the cloud and the local stack cannot drift: change
// Config.json, and both change. Standard by default (topics, sessions and duplicate detection need
// at least Standard; Basic has none of them), Premium with messaging units and partitions as a
// deployment choice for peaks Standard's throttling cannot carry. SAS is disabled.
param name string
param location string
param tags object

@description('Standard (the cheap default: 1,000 credits/s per namespace, shared capacity) or Premium (dedicated messaging units). docs/performance.md "Capacity" says which to choose for a peak.')
@allowed(['Standard', 'Premium'])
param sku string = 'Standard'

@description('Premium only: messaging units, a multiple (1, 2, 4, 8 or 16 times) of premiumPartitions.')
@allowed([1, 2, 4, 8, 16, 32, 64])
param messagingUnits int = 1

@description('Premium only: partitions of the namespace (1, 2 or 4), fixed at creation; every entity of a partitioned namespace is partitioned.')
@allowed([1, 2, 4])
param premiumPartitions int = 1

var premium = sku == 'Premium'

// Loaded when the Bicep file is compiled; the path is relative to this file.
var emulatorConfig = loadJsonContent('../servicebus-emulator/Config.json')

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: premium ? {
    name: 'Premium'
    tier: 'Premium'
    capacity: messagingUnits
  } : {
    name: 'Standard'
    tier: 'Standard'
  }
  properties: {
    premiumMessagingPartitions: premium ? premiumPartitions : null
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
    partitioned: premium && premiumPartitions > 1
  }
}

output name string = namespace.name
output fullyQualifiedNamespace string = '${namespace.name}.servicebus.windows.net'
